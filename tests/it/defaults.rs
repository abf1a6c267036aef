//! What a request or a command leaves out: generation runs to a stop or the context's end
//! (not 256 tokens), the context is the model's trained length lowered to what memory
//! holds (the plan says which and why), a server says both at startup, says when it is
//! ready, and names the node it lost and the requests it resumed when it fails over.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{pool, pool_file, pool_with_memory, scratch};

fn exe() -> PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// A synthesized model whose trained context is `context` tokens.
fn model_with_context(context: u32) -> PathBuf {
    let path = scratch().join(format!("defaults-context-{context}.gguf"));
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let out = Command::new(exe())
            .args(["model", "synth", "--context", &context.to_string(), "--out"])
            .arg(&path)
            .output()
            .expect("synth");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    path
}

/// `swactor ARGS`: exit code, stdout's JSON lines, stderr.
fn run(args: &[&str], model: &Path) -> (Option<i32>, Vec<Value>, String) {
    let out = Command::new(exe()).args(args).arg("--model").arg(model).output().expect("run");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out.status.code(), lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn generate_without_max_tokens_runs_to_the_end_of_the_context() {
    let model = model_with_context(320);
    let (code, lines, err) = run(&["generate", "--json", "--prompt", "hello world"], &model);
    assert_eq!(code, Some(0), "{err}");
    let summary = lines.iter().find(|l| l["type"] == "generation").expect("a summary");
    assert_eq!(summary["stop"], "context_full", "{summary}");
    let tokens = summary["tokens"].as_u64().expect("tokens");
    assert!(tokens > 256, "no cap of 256 tokens: {summary}");
    let with = ["generate", "--json", "--prompt", "hello world", "--max-tokens", "5"];
    let (_, lines, _) = run(&with, &model);
    let summary = lines.iter().find(|l| l["type"] == "generation").expect("a summary");
    assert_eq!(
        (summary["tokens"].as_u64(), summary["stop"].as_str()),
        (Some(5), Some("max_tokens"))
    );
}

#[test]
fn run_plan_says_the_context_and_why_trained_lowered_to_memory_or_given() {
    let model = model_with_context(4096);
    let roomy = pool_file("defaults-roomy.toml", &pool(2));
    let roomy = roomy.to_str().expect("path");
    let (code, _, err) = run(&["run", "plan", "--pool", roomy], &model);
    assert_eq!(code, Some(0), "{err}");
    let out = Command::new(exe())
        .args(["run", "plan", "--pool", roomy, "--model"])
        .arg(&model)
        .output()
        .expect("run plan");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("max_seq_len 4096"), "{text}");
    assert!(text.contains("context: 4096 tokens, the model's trained length"), "{text}");
    // Node 2 holds a few hundred MiB: the context is lowered to what it holds.
    let tight = pool_file("defaults-tight.toml", &pool_with_memory(&[8 << 30, 600 << 20]));
    let tight = tight.to_str().expect("path");
    let (code, lines, err) = run(&["run", "plan", "--json", "--pool", tight], &model);
    assert_eq!(code, Some(0), "{err}");
    let plan = &lines[0];
    let context = &plan["context"];
    assert_eq!(context["why"], json!({"kind": "memory", "node": 2}), "{plan}");
    let tokens = context["tokens"].as_u64().expect("tokens");
    assert!(tokens < 4096 && tokens % 256 == 0, "{context}");
    assert_eq!(plan["runtime"]["max_seq_len"].as_u64(), Some(tokens));
    // `--max-seq-len` is kept as given: where it does not fit, the plan is refused.
    let given = ["run", "plan", "--json", "--pool", tight, "--max-seq-len", "4096"];
    let (code, lines, _) = run(&given, &model);
    assert_eq!(code, Some(4));
    assert_eq!(lines[0]["reason"], "exceeds_node_memory", "{lines:?}");
    let given = ["run", "plan", "--json", "--pool", roomy, "--max-seq-len", "512"];
    let (_, lines, _) = run(&given, &model);
    assert_eq!(lines[0]["context"]["why"], json!({"kind": "given"}));
}

/// A `run local --serve --json` process with its stdout lines and stderr lines on
/// channels; killed and reaped when dropped.
struct Served {
    child: Child,
    url: String,
    stdout: mpsc::Receiver<Value>,
    stderr: mpsc::Receiver<String>,
    said: Vec<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGTERM drains and stops the local pool (its directory goes with it); a server
        // that does not exit in time is killed.
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(model: &Path, extra: &[&str]) -> Served {
        let mut child = Command::new(exe())
            .args(["run", "local", "--serve", "--json", "--http", "127.0.0.1:0", "--model"])
            .arg(model)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the server");
        let (out_tx, stdout) = mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && out_tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let (err_tx, stderr) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if err_tx.send(line).is_err() {
                    return;
                }
            }
        });
        let serving = stdout.recv_timeout(Duration::from_secs(60)).expect("a serving line");
        assert_eq!(serving["type"], "serving", "{serving}");
        let url = serving["url"].as_str().expect("url").trim_end_matches('/').to_string();
        let mut s = Served { child, url, stdout, stderr, said: Vec::new() };
        s.said.push(serving.to_string());
        s
    }

    /// The next stdout line of `kind`.
    fn line(&mut self, kind: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.stdout.recv_timeout(left).unwrap_or_else(|_| panic!("no {kind} line"));
            if v["type"] == kind {
                return v;
            }
        }
    }

    /// Waits for a stderr line that `pred` accepts; returns it.
    fn stderr_line(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        if let Some(l) = self.said.iter().find(|l| pred(l)) {
            return l.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let l = self.stderr.recv_timeout(left).unwrap_or_else(|_| {
                panic!("no stderr line {what}; said: {:#?}", self.said);
            });
            self.said.push(l.clone());
            if pred(&l) {
                return l;
            }
        }
    }
}

fn post(url: &str, body: &Value) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let a = rt.block_on(crate::serve::post_raw(url, body.to_string().into_bytes(), None));
    (a.status, a.body)
}

#[test]
fn a_server_says_its_context_and_default_max_tokens_then_ready_and_generates_to_the_end() {
    let model = model_with_context(320);
    let mut s = Served::start(&model, &["--stages", "2"]);
    let serving: Value = serde_json::from_str(&s.said[0]).expect("json");
    assert_eq!((serving["n_ctx"].as_u64(), &serving["max_tokens"]), (Some(320), &Value::Null));
    let said = s.stderr_line("with the defaults", |l| l.contains("a context of up to 320 tokens"));
    assert!(said.contains("until a stop or the context's end"), "{said}");
    let ready = s.line("ready");
    assert_eq!(ready["stages"], 2, "{ready}");
    assert_eq!(ready["context"]["tokens"], 320);
    assert_eq!(ready["context"]["why"]["kind"], "trained");
    s.stderr_line("ready", |l| l.starts_with("swactor: ready: the first session serves"));
    let (status, body) = post(
        &format!("{}/v1/completions", s.url),
        &json!({"prompt": "hello world", "temperature": 0}),
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    let (prompt, completion) =
        (v["usage"]["prompt_tokens"].as_u64(), v["usage"]["completion_tokens"].as_u64());
    assert_eq!(v["choices"][0]["finish_reason"], "length", "{v}");
    assert!(completion > Some(256), "generated to the context's end, not 256: {v}");
    assert!(prompt.zip(completion).is_some_and(|(p, c)| p + c >= 319), "{v}");
}

#[test]
fn the_failover_line_names_the_lost_node_and_how_many_requests_resumed() {
    let model = crate::support::synth_model(6);
    let mut s = Served::start(&model, &["--stages", "3", "--max-sequences", "2"]);
    s.line("ready");
    let url = format!("{}/v1/completions", s.url);
    let long = json!({"prompt": "hello world", "temperature": 0, "max_tokens": 1900,
                      "stream": true});
    let stream = std::thread::spawn(move || post(&url, &long));
    // Mid-decode: the stream has tokens and is far from done.
    let deadline = Instant::now() + Duration::from_secs(60);
    while crate::serve::metric(&crate::serve::metrics_of(&s.url), "swactor_generation_tokens_total")
        < 5.0
    {
        assert!(Instant::now() < deadline, "no tokens came");
        std::thread::sleep(Duration::from_millis(10));
    }
    let victim = crate::serve::local_node_pid(s.child.id(), 2).expect("node 2's pid");
    let pid = rustix::process::Pid::from_raw(victim).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");
    let lost = s.stderr_line("naming the lost node", |l| l.contains("re-forming the session"));
    assert!(lost.contains("on node 2"), "{lost}");
    let resumed = s.stderr_line("counting the resumed", |l| l.contains("requests resumed"));
    assert!(resumed.contains(": 1 requests resumed"), "{resumed}");
    let (status, body) = stream.join().expect("stream");
    assert_eq!(status, 200);
    assert!(!body.contains("\"error\""), "the stream resumed: {body}");
}
