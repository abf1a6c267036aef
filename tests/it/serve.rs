//! The OpenAI-compatible server over real sockets with a real HTTP client: `run local
//! --serve` on SmolLM2 (field names and SSE framing, every error status, eight concurrent
//! streamed chats equal to `swactor generate --chat`, a disconnect that frees its slot,
//! the API key, 429, SIGTERM draining) and `orchestrate serve` over booted nodes (503
//! until a session serves, a new session after a SIGKILLed node comes back). Every child
//! is stopped and reaped.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::smollm2;

fn exe() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// A server process, stopped and reaped when dropped.
pub struct Server {
    child: Child,
    /// `http://ADDR`, without a trailing slash.
    pub url: String,
    lines: mpsc::Receiver<Value>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `swactor ARGS --json --http 127.0.0.1:0` and waits for its `serving` line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(exe())
            .args(args)
            .args(["--json", "--http", "127.0.0.1:0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(60)).expect("a serving line");
        assert_eq!(first["type"], "serving", "{first}");
        let url = first["url"].as_str().expect("url").trim_end_matches('/').to_string();
        Server { child, url, lines }
    }

    /// `run local --serve` on SmolLM2 with three stages and `extra` flags.
    pub fn local(model: &Path, extra: &[&str]) -> Server {
        let model = model.to_str().expect("utf-8 path");
        let mut args = vec!["run", "local", "--serve", "--model", model, "--max-seq-len", "512"];
        args.extend_from_slice(extra);
        let server = Server::start(&args);
        server.wait_healthy(Duration::from_secs(90));
        server
    }

    /// Waits until `/health` says ok.
    pub fn wait_healthy(&self, timeout: Duration) {
        self.wait_health(timeout, |status, _| status == 200);
    }

    /// Waits until `/health` answers as `pred` wants; returns that answer.
    pub fn wait_health(&self, timeout: Duration, pred: impl Fn(u16, &Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        let mut last = (0, Value::Null);
        while Instant::now() < deadline {
            if let Ok((status, body)) = get(&format!("{}/health", self.url)) {
                if pred(status, &body) {
                    return body;
                }
                last = (status, body);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the server's health never became what was waited for; last {last:?}");
    }

    /// SIGTERM; the exit status and the remaining stdout lines.
    pub fn terminate(mut self) -> (Option<i32>, Vec<Value>) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("kill");
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(Instant::now() < deadline, "the server did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let lines = self.lines.try_iter().collect();
        (status.code(), lines)
    }
}

/// A one-thread runtime for a client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// An HTTP client that goes nowhere but where it is told.
pub fn client() -> reqwest::Client {
    // reqwest is built without a TLS provider of its own; plain HTTP needs none, but the
    // builder asks for one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().expect("client")
}

/// GET `url`: status and JSON body (`Null` when not JSON).
pub fn get(url: &str) -> Result<(u16, Value), reqwest::Error> {
    runtime().block_on(async {
        let r = client().get(url).send().await?;
        let status = r.status().as_u16();
        let body = r.text().await?;
        Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
    })
}

/// A response: status, headers and body.
pub struct Answer {
    /// The status.
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The SSE events' data, in order.
    pub fn events(&self) -> Vec<String> {
        assert!(self.body.ends_with("\n\n"), "an SSE body ends with a blank line: {:?}", self.body);
        self.body
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")).map(str::to_string))
            .collect()
    }
}

/// POST `body` (raw) to `url` with optional bearer `key`.
pub async fn post_raw(url: &str, body: Vec<u8>, key: Option<&str>) -> Answer {
    let mut r = client().post(url).header("content-type", "application/json").body(body);
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let r = r.send().await.expect("send");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.text().await.expect("body");
    Answer { status, headers, body }
}

fn post(url: &str, body: &Value) -> Answer {
    runtime().block_on(post_raw(url, body.to_string().into_bytes(), None))
}

fn error_of(a: &Answer) -> Value {
    let v = a.json();
    let e = v["error"].clone();
    assert_eq!(e["code"], a.status, "{v}");
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert!(e["type"].is_string(), "{v}");
    e
}

/// `swactor generate --chat` on one user message: its text (as printed, the detokenizer's
/// tail included, without the closing newline).
fn generate_chat(model: &Path, prompt: &str, max_tokens: u32) -> String {
    let out = Command::new(exe())
        .args(["generate", "--chat", "--max-seq-len", "512", "--model"])
        .arg(model)
        .args(["--prompt", prompt, "--max-tokens", &max_tokens.to_string()])
        .output()
        .expect("generate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

/// A streamed chat's text, checking the framing on the way.
fn streamed_text(a: &Answer, usage: bool) -> (String, Value) {
    assert_eq!(a.status, 200, "{}", a.body);
    let ct = a.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    let events = a.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap_or_else(|x| panic!("{x}: {e}")))
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant", "the role comes first");
    let mut text = String::new();
    let mut finish = Value::Null;
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], chunks[0]["id"]);
        if let Some(choice) = c["choices"].get(0) {
            assert!(finish.is_null(), "nothing after the finish_reason but the usage chunk");
            text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
            if !choice["finish_reason"].is_null() {
                finish = choice["finish_reason"].clone();
            }
        }
    }
    assert!(finish == "stop" || finish == "length", "{finish}");
    let last = chunks.last().expect("chunks");
    if usage {
        assert_eq!(last["choices"], json!([]), "the usage chunk has no choices");
        assert!(last["usage"]["completion_tokens"].as_u64().is_some(), "{last}");
        assert!(last["timings"]["predicted_n"].as_u64().is_some(), "{last}");
    } else {
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    }
    (text, last.clone())
}

fn chat_body(content: &str, max_tokens: u32, stream: bool) -> Value {
    json!({
        "model": "anything",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

#[test]
fn a_served_pipeline_answers_in_openai_shapes_and_every_error_in_one_shape() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--max-body-bytes", "65536"]);
    let u = &s.url;
    let (status, health) = get(&format!("{u}/health")).expect("health");
    assert_eq!((status, health), (200, json!({"status": "ok"})));
    let (_, models) = get(&format!("{u}/v1/models")).expect("models");
    assert_eq!(models["object"], "list");
    let name = models["data"][0]["id"].as_str().expect("model id").to_string();

    // A whole completion: text, usage and llama-server's timings.
    let a = post(
        &format!("{u}/v1/completions"),
        &json!({"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let v = a.json();
    assert_eq!(
        (v["object"].as_str(), v["model"].as_str()),
        (Some("text_completion"), Some(name.as_str()))
    );
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 12);
    for f in ["prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"] {
        assert!(v["timings"][f].is_number(), "timings.{f}: {v}");
    }
    // Token ids work as a prompt, and tokenize / detokenize agree.
    let t = post(&format!("{u}/tokenize"), &json!({"content": "Once upon a time"})).json();
    let ids = t["tokens"].clone();
    let d = post(&format!("{u}/detokenize"), &json!({"tokens": ids})).json();
    assert_eq!(d["content"], "Once upon a time");
    let b = post(
        &format!("{u}/v1/completions"),
        &json!({"prompt": ids, "max_tokens": 12, "temperature": 0}),
    );
    assert_eq!(b.json()["choices"][0]["text"], v["choices"][0]["text"], "ids or text, one prompt");

    // A streamed chat: role first, text deltas, finish_reason, usage, [DONE].
    let a = post(
        &format!("{u}/v1/chat/completions"),
        &chat_body("What is the capital of France?", 16, true),
    );
    let (text, _) = streamed_text(&a, true);
    let whole = post(
        &format!("{u}/v1/chat/completions"),
        &chat_body("What is the capital of France?", 16, false),
    );
    assert_eq!(whole.json()["choices"][0]["message"]["content"], text.as_str());
    assert_eq!(whole.json()["choices"][0]["message"]["role"], "assistant");

    // Log-probabilities: greedy picks the most likely token, listed first among the
    // alternatives; a completion's tokens add up to its text.
    let body = json!({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                      "max_tokens": 6, "temperature": 0, "logprobs": true, "top_logprobs": 3});
    let lp = post(&format!("{u}/v1/chat/completions"), &body);
    assert_eq!(lp.status, 200, "{}", lp.body);
    let content = lp.json()["choices"][0]["logprobs"]["content"].clone();
    let content = content.as_array().expect("a content list").clone();
    assert_eq!(content.len(), 6, "{content:?}");
    for t in &content {
        let top = t["top_logprobs"].as_array().expect("top");
        assert_eq!(top.len(), 3);
        assert_eq!(top[0]["token"], t["token"], "greedy takes the most likely: {t}");
        let l = t["logprob"].as_f64().expect("logprob");
        assert!(l <= 0.0 && (l - top[0]["logprob"].as_f64().expect("top logprob")).abs() < 1e-6);
    }
    let body = json!({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0,
                      "logprobs": 2, "stream": true});
    let a = post(&format!("{u}/v1/completions"), &body);
    let events = a.events();
    let mut tokens = String::new();
    let mut streamed = String::new();
    for e in events.iter().filter(|e| *e != "[DONE]") {
        let c: Value = serde_json::from_str(e).expect("chunk");
        streamed.push_str(c["choices"][0]["text"].as_str().unwrap_or(""));
        if let Some(ts) = c["choices"][0]["logprobs"]["tokens"].as_array() {
            tokens.extend(ts.iter().map(|t| t.as_str().unwrap_or("").to_string()));
            assert_eq!(
                c["choices"][0]["logprobs"]["top_logprobs"][0].as_object().map(|o| o.len()),
                Some(2)
            );
        }
    }
    assert_eq!(tokens, streamed, "the tokens' texts are the streamed text");
    let plain = completion_of(u, "Once upon a time", 8);
    assert_eq!(streamed, plain, "asking for log-probabilities changes no token");

    // Errors, one shape each.
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            json!({"messages": [{"role": "user", "content": "x"}], "n": 2}),
            400,
            "invalid_request_error",
        ),
        (json!({"messages": "nope"}), 400, "invalid_request_error"),
        (
            json!({"messages": [{"role": "user", "content": "word ".repeat(600)}]}),
            400,
            "exceed_context_size_error",
        ),
    ];
    for (body, status, kind) in cases {
        let a = post(&format!("{u}/v1/chat/completions"), &body);
        assert_eq!(a.status, status, "{}", a.body);
        let e = error_of(&a);
        assert_eq!(e["type"], kind);
        if kind == "exceed_context_size_error" {
            assert_eq!(e["n_ctx"], 512);
            assert!(e["n_prompt_tokens"].as_u64().is_some_and(|n| n > 512), "{e}");
        }
    }
    let big =
        runtime().block_on(post_raw(&format!("{u}/v1/completions"), vec![b' '; 70_000], None));
    assert_eq!(big.status, 413, "{}", big.body);
    assert_eq!(error_of(&big)["type"], "request_too_large");
    let nf = runtime().block_on(post_raw(&format!("{u}/v2/nothing"), b"{}".to_vec(), None));
    assert_eq!((nf.status, error_of(&nf)["type"].as_str()), (404, Some("not_found_error")));
    let bad =
        runtime().block_on(post_raw(&format!("{u}/v1/completions"), b"{not json".to_vec(), None));
    assert_eq!(bad.status, 400);
    error_of(&bad);

    // The clients in the binary say the same.
    let completion = v["choices"][0]["text"].as_str().expect("text").to_string();
    for stream in [false, true] {
        let mut cmd = Command::new(exe());
        cmd.args(["complete", "--server", u, "--prompt", "Once upon a time", "--max-tokens", "12"])
            .args(["--temperature", "0"]);
        if stream {
            cmd.arg("--stream");
        }
        let out = cmd.output().expect("complete");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{completion}\n"));
    }
    let mut chat = Command::new(exe())
        .args(["chat", "--server", u, "--max-tokens", "16", "--temperature", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("chat");
    chat.stdin
        .take()
        .expect("stdin")
        .write_all(b"What is the capital of France?\n")
        .expect("write");
    let out = chat.wait_with_output().expect("chat");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{text}\n"));
    let refused = Command::new(exe())
        .args(["complete", "--server", u, "--prompt", "x", "--max-tokens", "0"])
        .output()
        .expect("complete");
    assert_eq!(refused.status.code(), Some(3), "a refused request exits 3");
    let nobody = Command::new(exe())
        .args(["complete", "--server", "http://127.0.0.1:9", "--prompt", "x", "--json"])
        .output()
        .expect("complete");
    assert_eq!(nobody.status.code(), Some(8), "no server exits 8");
    let line: Value = serde_json::from_slice(&nobody.stdout).expect("an error line");
    assert_eq!(line["reason"], "server_unreachable");

    // Metrics name what happened.
    let metrics = runtime().block_on(async {
        client()
            .get(format!("{u}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text")
    });
    for name in [
        "swactor_requests_running",
        "swactor_requests_waiting",
        "swactor_request_success_total{finished_reason=\"length\"}",
        "swactor_prompt_tokens_total",
        "swactor_generation_tokens_total",
        "swactor_time_to_first_token_seconds_bucket",
        "swactor_inter_token_latency_seconds_bucket",
        "swactor_e2e_request_latency_seconds_bucket",
        "swactor_request_queue_time_seconds_bucket",
        "swactor_slots_in_use",
        "swactor_sessions_formed_total 1",
        "swactor_stage_step_seconds_count{stage=\"2\"}",
        "swactor_hop_seconds_count{edge=",
    ] {
        assert!(metrics.contains(name), "{name} missing from the metrics:\n{metrics}");
    }
    let (code, lines) = s.terminate();
    assert_eq!(code, Some(0), "a stop exits 0");
    assert!(lines.iter().any(|l| l["type"] == "served"), "{lines:?}");
}

/// A greedy completion's text.
fn completion_of(u: &str, prompt: &str, max_tokens: u32) -> String {
    let v = post(
        &format!("{u}/v1/completions"),
        &json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}),
    )
    .json();
    v["choices"][0]["text"].as_str().expect("text").to_string()
}

const CHATS: [&str; 8] = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Name three colors.",
    "How many legs does a spider have?",
    "Say hello in Spanish.",
    "What is two plus two?",
    "Give me a word that rhymes with cat.",
    "What do bees make?",
];

#[test]
fn eight_concurrent_streamed_chats_each_equal_generate_chat_on_the_same_message() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--max-sequences", "8"]);
    let url = format!("{}/v1/chat/completions", s.url);
    let answers = runtime().block_on(async {
        let calls = CHATS.iter().map(|c| {
            let body = chat_body(c, 24, true).to_string().into_bytes();
            post_raw(&url, body, None)
        });
        futures_util::future::join_all(calls).await
    });
    for (chat, a) in CHATS.iter().zip(&answers) {
        let (text, _) = streamed_text(a, true);
        assert_eq!(text, generate_chat(&model, chat, 24), "{chat}");
    }
}

#[test]
fn a_served_mixture_of_experts_answers_eight_concurrent_completions_each_as_generate_does() {
    use swactor::model::synth::SynthArch;
    for arch in [SynthArch::Qwen3Moe, SynthArch::Qwen2Moe, SynthArch::Mixtral, SynthArch::GptOss] {
        let model = crate::families::family_model(arch);
        let s = Server::local(&model, &["--max-sequences", "8", "--stages", "3"]);
        let url = format!("{}/v1/completions", s.url);
        let answers = runtime().block_on(async {
            let calls = CHATS.iter().map(|c| {
                let body = json!({"prompt": c, "max_tokens": 16, "temperature": 0});
                post_raw(&url, body.to_string().into_bytes(), None)
            });
            futures_util::future::join_all(calls).await
        });
        for (prompt, a) in CHATS.iter().zip(&answers) {
            assert_eq!(a.status, 200, "{arch:?}: {}", a.body);
            let text = a.json()["choices"][0]["text"].as_str().expect("text").to_string();
            let out = Command::new(exe())
                .args(["generate", "--max-seq-len", "512", "--max-tokens", "16", "--model"])
                .arg(&model)
                .args(["--prompt", prompt])
                .output()
                .expect("generate");
            let want = String::from_utf8_lossy(&out.stdout);
            assert_eq!(text, want.strip_suffix('\n').unwrap_or(&want), "{arch:?}: {prompt}");
        }
    }
}

/// The slot holding a sequence, if any: its `n_decoded`.
fn busy_slot(u: &str) -> Option<u64> {
    let (_, slots) = get(&format!("{u}/slots")).expect("slots");
    let slots = slots.as_array().expect("slots").clone();
    slots.iter().find(|s| s["is_processing"] == true).map(|s| s["n_decoded"].as_u64().expect("n"))
}

#[test]
fn a_client_that_disconnects_stops_its_generation_at_once_and_frees_its_slot() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--max-sequences", "2"]);
    let u = s.url.clone();
    // 500 tokens: far more than a working cancel lets it make after the client is gone.
    let max_tokens: u32 = 500;
    let rt = runtime();
    let r = rt.block_on(async {
        let body = json!({"prompt": "Once upon a time", "max_tokens": max_tokens, "stream": true,
                          "ignore_eos": true});
        let mut r = client()
            .post(format!("{u}/v1/completions"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("send");
        // A few chunks arrive, then the client goes away.
        for _ in 0..3 {
            r.chunk().await.expect("chunk").expect("more");
        }
        r
    });
    let at_drop = busy_slot(&u).expect("the request holds a slot");
    drop(r);
    drop(rt);
    // The slot frees within a few tokens of the disconnect: a cancel that did not reach
    // the session would let it run on towards 500 (seen here, or still busy at the end).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = at_drop;
    while let Some(n) = busy_slot(&u) {
        last = n;
        assert!(n < at_drop + 100, "generation went on after the disconnect: {n} tokens");
        assert!(Instant::now() < deadline, "the slot stayed busy ({n} tokens)");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(last < u64::from(max_tokens) / 2, "{last}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = metrics_of(&u);
        if metrics.contains("swactor_slots_in_use 0")
            && metrics.contains("swactor_requests_running 0")
        {
            break;
        }
        assert!(Instant::now() < deadline, "the load never fell to 0: {metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_api_key_guards_every_route_but_health_and_a_full_queue_is_429_with_retry_after() {
    let Some(model) = smollm2() else { return };
    let dir = crate::support::scratch().join("serve-key");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let key_file = dir.join("key");
    std::fs::write(&key_file, "s3cret-key\n").expect("key");
    let key_arg = key_file.to_str().expect("path");
    let s =
        Server::local(&model, &["--api-key-file", key_arg, "--max-sequences", "1", "--queue", "1"]);
    let u = s.url.clone();
    assert_eq!(get(&format!("{u}/health")).expect("health").0, 200);
    let (status, body) = get(&format!("{u}/v1/models")).expect("models");
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("authentication_error")));
    runtime().block_on(async {
        let body = json!({"prompt": "Once", "max_tokens": 2}).to_string().into_bytes();
        let wrong =
            post_raw(&format!("{u}/v1/completions"), body.clone(), Some("s3cret-kez")).await;
        assert_eq!(wrong.status, 401);
        let right = post_raw(&format!("{u}/v1/completions"), body, Some("s3cret-key")).await;
        assert_eq!(right.status, 200, "{}", right.body);
        // One slot, one queue place: of three long requests at once, one is refused.
        let long = json!({"prompt": "Once upon a time", "max_tokens": 60}).to_string().into_bytes();
        let target = format!("{u}/v1/completions");
        let calls = (0..3).map(|_| post_raw(&target, long.clone(), Some("s3cret-key")));
        let answers = futures_util::future::join_all(calls).await;
        let refused: Vec<&Answer> = answers.iter().filter(|a| a.status == 429).collect();
        assert_eq!(refused.len(), 1, "{:?}", answers.iter().map(|a| a.status).collect::<Vec<_>>());
        assert_eq!(refused[0].headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
        assert_eq!(error_of(refused[0])["type"], "rate_limit_error");
        assert_eq!(answers.iter().filter(|a| a.status == 200).count(), 2);
    });
}

/// Starts a greedy streamed completion of `max_tokens` tokens on a thread of its own and
/// returns once its first text arrived; the thread yields the whole body.
fn stream_in_background(u: &str, max_tokens: u32) -> std::thread::JoinHandle<String> {
    let (tx, rx) = mpsc::channel();
    let url = format!("{u}/v1/completions");
    let reader = std::thread::spawn(move || {
        runtime().block_on(async {
            let body = json!({"prompt": "Once upon a time", "max_tokens": max_tokens,
                              "temperature": 0, "stream": true});
            let mut r = client()
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .expect("send");
            let mut text = String::new();
            let mut told = false;
            while let Ok(Some(c)) = r.chunk().await {
                text.push_str(&String::from_utf8_lossy(&c));
                if !told && text.contains("\"text\"") {
                    told = true;
                    let _ = tx.send(());
                }
            }
            text
        })
    });
    rx.recv_timeout(Duration::from_secs(30)).expect("the stream started");
    reader
}

#[test]
fn sigterm_lets_a_stream_in_flight_finish_and_the_server_exits_0() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--grace-s", "30"]);
    let u = s.url.clone();
    let reader = stream_in_background(&u, 80);
    let (code, _) = s.terminate();
    let body = reader.join().expect("reader");
    assert!(body.ends_with("data: [DONE]\n\n"), "the stream finished: {body}");
    assert!(body.contains("\"finish_reason\":\"length\""), "{body}");
    assert_eq!(code, Some(0));
}

/// A node booted on loopback for `orchestrate serve`: its process and what it printed.
struct Node {
    child: Child,
    avail: Value,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Boots node `n` with its key in `dir`, at `listen` / `swim`, joining `seed`.
fn boot(dir: &Path, n: u64, orch: &str, listen: &str, swim: &str, seed: Option<&str>) -> Node {
    let mut cmd = Command::new(exe());
    cmd.args([
        "node",
        "boot",
        "--json",
        "--node-id",
        &n.to_string(),
        "--listen",
        listen,
        "--swim",
        swim,
    ])
    .arg("--key")
    .arg(dir.join(format!("n{n}.key")))
    .arg("--admin")
    .arg(dir.join(format!("n{n}.sock")))
    .args(["--orchestrator", orch, "--threads", "1"]);
    if let Some(s) = seed {
        cmd.args(["--join", s]);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("node boot");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["type"] == "node_available"
            {
                let _ = tx.send(v);
            }
        }
    });
    let avail = rx.recv_timeout(Duration::from_secs(30)).expect("node_available");
    Node { child, avail }
}

#[test]
fn orchestrate_serve_is_503_until_it_serves_and_without_resume_forms_a_new_session_after_a_sigkilled_node_returns()
 {
    let Some(model) = smollm2() else { return };
    let dir = crate::support::scratch().join("serve-reform");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch_key = dir.join("orch.key");
    let out =
        Command::new(exe()).args(["node", "id", "--key"]).arg(&orch_key).output().expect("id");
    let orch = String::from_utf8(out.stdout).expect("utf8").trim().to_string();
    let mut nodes = vec![boot(&dir, 1, &orch, "127.0.0.1:0", "127.0.0.1:0", None)];
    let seed = nodes[0].avail["swim_addr"].as_str().expect("swim").to_string();
    nodes.push(boot(&dir, 2, &orch, "127.0.0.1:0", "127.0.0.1:0", Some(&seed)));
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    for node in &nodes {
        let a = &node.avail;
        pool.push_str(&format!(
            "[[nodes]]\nnode_id = {}\nendpoint_id = \"{}\"\naddrs = {}\nmemory_bytes = 8589934592\n\n",
            a["node_id"],
            a["endpoint_id"].as_str().expect("id"),
            a["addrs"]
        ));
    }
    std::fs::write(dir.join("pool.toml"), pool).expect("pool");
    // Node 2 goes away before the server starts: it cannot serve yet.
    let node2_listen = nodes[1].avail["addrs"][0].as_str().expect("addr").to_string();
    let node2_swim = nodes[1].avail["swim_addr"].as_str().expect("swim").to_string();
    drop(nodes.pop());
    let (pool_file, key) = (dir.join("pool.toml"), orch_key.to_str().expect("key").to_string());
    let model_arg = model.to_str().expect("model");
    let s = Server::start(&[
        "orchestrate",
        "serve",
        "--pool",
        pool_file.to_str().expect("pool"),
        "--key",
        &key,
        "--model",
        model_arg,
        "--listen",
        "127.0.0.1:0",
        "--swim",
        "127.0.0.1:0",
        "--window-ms",
        "300",
        "--pool-timeout",
        "120",
        "--max-seq-len",
        "512",
        "--no-resume",
    ]);
    let h = s.wait_health(Duration::from_secs(10), |st, _| st == 503);
    assert_eq!(h["status"], "pool_not_ready", "{h}");
    let refused =
        post(&format!("{}/v1/completions", s.url), &json!({"prompt": "Once", "max_tokens": 2}));
    assert_eq!(refused.status, 503);
    assert_eq!(refused.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    assert_eq!(error_of(&refused)["type"], "unavailable_error");

    // Node 2 comes up: the session forms and serves.
    nodes.push(boot(&dir, 2, &orch, &node2_listen, &node2_swim, Some(&seed)));
    s.wait_healthy(Duration::from_secs(90));
    let body = json!({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0});
    let first = post(&format!("{}/v1/completions", s.url), &body);
    assert_eq!(first.status, 200, "{}", first.body);

    // SIGKILL node 2: the session faults, /health says so, and it forms again once the
    // node is back with its key.
    let pid = rustix::process::Pid::from_raw(nodes[1].child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");
    let h = s.wait_health(Duration::from_secs(30), |st, _| st == 503);
    assert!(h["status"] == "session_faulted" || h["status"] == "pool_not_ready", "{h}");
    drop(nodes.pop());
    nodes.push(boot(&dir, 2, &orch, &node2_listen, &node2_swim, Some(&seed)));
    s.wait_healthy(Duration::from_secs(90));
    let again = post(&format!("{}/v1/completions", s.url), &body);
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["choices"][0]["text"], first.json()["choices"][0]["text"]);
    let metrics = runtime().block_on(async {
        client().get(format!("{}/metrics", s.url)).send().await.expect("m").text().await.expect("t")
    });
    assert!(metrics.contains("swactor_sessions_formed_total 2"), "{metrics}");
    assert!(metrics.contains("swactor_session_faults_total{reason="), "{metrics}");
    let (code, _) = s.terminate();
    assert_eq!(code, Some(0));
}

#[test]
fn a_request_that_arrives_while_the_session_reforms_waits_for_it_and_gets_its_whole_answer() {
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = crate::support::synth_model(4);
    let mut nodes = crate::run::Nodes::boot("serve-reforming", 2, |_| vec![]);
    // Node 1 cannot hold the model: the session runs on node 2 alone and, once node 2 is
    // lost, re-forms only when it comes back; requests arrive in between for as long as
    // the test takes.
    let pool = std::fs::read_to_string(nodes.pool_file()).expect("pool");
    let pool = pool.replacen("memory_bytes = 8589934592", "memory_bytes = 1048576", 1);
    std::fs::write(nodes.pool_file(), pool).expect("pool");
    let s = Server::start(&[
        "orchestrate",
        "serve",
        "--pool",
        nodes.pool_file().to_str().expect("pool"),
        "--key",
        nodes.key().to_str().expect("key"),
        "--model",
        model.to_str().expect("model"),
        "--listen",
        "127.0.0.1:0",
        "--swim",
        "127.0.0.1:0",
        "--window-ms",
        "300",
        "--stages",
        "1",
        "--nodes",
        "2",
        "--max-seq-len",
        "512",
        "--queue",
        "1",
        "--resume-timeout",
        "300",
    ]);
    s.wait_healthy(Duration::from_secs(90));
    let url = format!("{}/v1/completions", s.url);
    let body = json!({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0});
    let first = post(&url, &body);
    assert_eq!(first.status, 200, "{}", first.body);
    crate::run::signal(nodes.pid(2), rustix::process::Signal::KILL);
    s.wait_health(Duration::from_secs(60), |st, h| st == 503 && h["status"] == "reforming");
    // Two requests arrive: the queue holds one, which waits; the other is refused at once.
    let (tx, rx) = mpsc::channel();
    for _ in 0..2 {
        let (tx, url, body) = (tx.clone(), url.clone(), body.clone());
        std::thread::spawn(move || {
            let _ = tx.send(post(&url, &body));
        });
    }
    let refused = rx.recv_timeout(Duration::from_secs(60)).expect("an answer while re-forming");
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(error_of(&refused)["reason"], "busy");
    let (_, h) = get(&format!("{}/health", s.url)).expect("health");
    assert_eq!(h["status"], "reforming", "refused while the session re-forms: {h}");
    nodes.restart(2);
    let waited = rx.recv_timeout(Duration::from_secs(120)).expect("the waiting request");
    assert_eq!(waited.status, 200, "{}", waited.body);
    assert_eq!(waited.json()["choices"][0]["text"], first.json()["choices"][0]["text"]);
    let m = metrics_of(&s.url);
    assert_eq!(metric(&m, "swactor_failovers_total{outcome=\"resumed\"}"), 1.0, "{m}");
    let (code, _) = s.terminate();
    assert_eq!(code, Some(0));
}

#[test]
fn a_second_signal_cuts_the_grace_short_and_the_stream_in_flight_ends_with_an_error_event() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--grace-s", "300"]);
    let u = s.url.clone();
    let reader = stream_in_background(&u, 400);
    let pid = rustix::process::Pid::from_raw(s.child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("first");
    // The first signal is seen (the listener closes: no new connection) before the second.
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(&format!("{}/health", s.url)).is_ok() {
        assert!(Instant::now() < deadline, "the listener stayed open after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    let (code, _) = s.terminate();
    assert!(start.elapsed() < Duration::from_secs(60), "the grace of 300 s was cut short");
    assert_eq!(code, Some(0));
    let body = reader.join().expect("reader");
    assert!(body.contains("\"error\"") && body.contains("operator"), "{body}");
    assert!(!body.contains("[DONE]"), "{body}");
}

/// The pid of `run local`'s node `k`, a child of process `parent`.
pub fn local_node_pid(parent: u32, k: u32) -> Option<i32> {
    let want = format!("\0--node-id\0{k}\0");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let ppid: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline);
        (ppid == parent && cmdline.contains("\0boot\0") && cmdline.contains(&want)).then_some(pid)
    })
}

/// `/metrics`' text.
pub fn metrics_of(u: &str) -> String {
    runtime().block_on(async {
        client().get(format!("{u}/metrics")).send().await.expect("m").text().await.expect("t")
    })
}

/// The value of the metric line that starts with `name` (0 when absent).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

#[test]
fn a_stage_node_sigkilled_mid_decode_loses_no_stream_every_text_equals_generate() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--max-sequences", "8"]);
    let url = format!("{}/v1/chat/completions", s.url);
    let tokens = 40;
    let streams = std::thread::spawn(move || {
        runtime().block_on(async {
            let calls = CHATS.iter().map(|c| {
                let body = chat_body(c, tokens, true).to_string().into_bytes();
                post_raw(&url, body, None)
            });
            futures_util::future::join_all(calls).await
        })
    });
    // Mid-decode: every stream has tokens, none is done.
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(&metrics_of(&s.url), "swactor_generation_tokens_total") < 24.0 {
        assert!(Instant::now() < deadline, "no tokens came");
        std::thread::sleep(Duration::from_millis(10));
    }
    let victim = local_node_pid(s.child.id(), 2).expect("node 2's pid");
    let pid = rustix::process::Pid::from_raw(victim).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");
    let answers = streams.join().expect("streams");
    for (chat, a) in CHATS.iter().zip(&answers) {
        assert_eq!(a.status, 200, "{chat}: {}", a.body);
        assert!(!a.body.contains("\"error\""), "{chat}: no error event: {}", a.body);
        let (text, _) = streamed_text(a, true);
        assert_eq!(text, generate_chat(&model, chat, tokens), "{chat}");
    }
    s.wait_healthy(Duration::from_secs(30));
    let m = metrics_of(&s.url);
    assert_eq!(metric(&m, "swactor_failovers_total{outcome=\"resumed\"}"), 1.0, "{m}");
    assert_eq!(metric(&m, "swactor_resume_seconds_count"), 1.0, "{m}");
    assert_eq!(metric(&m, "swactor_request_failure_total"), 0.0, "{m}");
    // The re-formed session serves new requests too.
    assert!(!completion_of(&s.url, "Once upon a time", 8).is_empty());
    let (code, _) = s.terminate();
    assert_eq!(code, Some(0));
}

#[test]
fn eight_concurrent_chats_served_with_speculation_equal_generate_and_an_opt_out_drafts_nothing() {
    let Some(model) = smollm2() else { return };
    // One group of eight is crowded: its rows cost a step each and no draft length
    // pays. The floor drafts whenever the n-gram lookup finds one, whatever the timings.
    let flags = ["--max-sequences", "8", "--speculate", "ngram", "--draft-min", "1"];
    let s = Server::local(&model, &flags);
    let url = format!("{}/v1/chat/completions", s.url);
    // Seven chats and one that asks for a repetition, so that the n-gram drafter has
    // something to find while all eight stream together.
    let mut chats = CHATS;
    chats[7] = "Repeat this sentence three times: the old lighthouse keeper looked out at the \
                sea.";
    let answers = runtime().block_on(async {
        let calls = chats.iter().map(|c| {
            let body = chat_body(c, 40, true).to_string().into_bytes();
            post_raw(&url, body, None)
        });
        futures_util::future::join_all(calls).await
    });
    for (chat, a) in chats.iter().zip(&answers) {
        let (text, _) = streamed_text(a, true);
        assert_eq!(text, generate_chat(&model, chat, 40), "{chat}");
    }
    let drafted = |s: &Server| -> u64 {
        let text = runtime().block_on(async {
            client().get(format!("{}/metrics", s.url)).send().await.expect("metrics").text().await
        });
        let text = text.expect("metrics text");
        let line = text
            .lines()
            .find(|l| l.starts_with("swactor_spec_decode_num_draft_tokens_total"))
            .expect("the draft counter");
        line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a count")
    };
    let before = drafted(&s);
    assert!(before > 0, "the n-gram drafter drafted while the eight chats streamed");
    let prompt = "Copy: the old lighthouse keeper looked out at the sea. Copy: the old lighthouse \
                  keeper looked out at the sea. Copy:";
    let body = json!({"prompt": prompt, "max_tokens": 24, "temperature": 0, "speculative": false});
    let opted_out = post(&format!("{}/v1/completions", s.url), &body).json();
    assert_eq!(drafted(&s), before, "a request that opts out drafts nothing");
    assert_eq!(
        opted_out["choices"][0]["text"].as_str(),
        Some(completion_of(&s.url, prompt, 24).as_str())
    );
    assert!(drafted(&s) > before, "the same request speculating drafts");
}

#[test]
fn concurrent_chats_served_with_a_draft_model_equal_generate_and_count_its_drafts() {
    let Some(model) = smollm2() else { return };
    // A tiny random draft with the model's vocabulary: its drafts are nearly all
    // rejected, so every sequence's slot rolls back again and again.
    let draft = crate::support::scratch().join("serve-draft-49152.gguf");
    let synth = Command::new(exe())
        .args(["model", "synth", "--blocks", "1", "--hidden", "64", "--heads", "2"])
        .args(["--kv-heads", "1", "--ffn", "128", "--seed", "3", "--vocab-from"])
        .arg(&model)
        .arg("--out")
        .arg(&draft)
        .output()
        .expect("synth");
    assert!(synth.status.success(), "{}", String::from_utf8_lossy(&synth.stderr));
    let draft_arg = draft.to_str().expect("utf-8 path");
    let s = Server::local(&model, &["--max-sequences", "4", "--draft-model", draft_arg]);
    let url = format!("{}/v1/chat/completions", s.url);
    let answers = runtime().block_on(async {
        let calls = CHATS[..4].iter().map(|c| {
            let body = chat_body(c, 16, true).to_string().into_bytes();
            post_raw(&url, body, None)
        });
        futures_util::future::join_all(calls).await
    });
    for (chat, a) in CHATS.iter().zip(&answers) {
        let (text, _) = streamed_text(a, true);
        assert_eq!(text, generate_chat(&model, chat, 16), "{chat}");
    }
    let m = runtime().block_on(async {
        client().get(format!("{}/metrics", s.url)).send().await.expect("metrics").text().await
    });
    let m = m.expect("metrics text");
    assert!(metric(&m, "swactor_spec_decode_num_draft_tokens_total") > 0.0, "{m}");
    let (code, _) = s.terminate();
    assert_eq!(code, Some(0));
}
