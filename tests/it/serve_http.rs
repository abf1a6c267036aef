//! The server's listener and browser-facing checks over raw sockets on loopback: stalled
//! bodies and drip-fed headers cut off, connection caps answered at once (503, or 429 for
//! one address), CORS preflights, `Origin` and `Host` checks, JSON-only bodies, the
//! bearer scheme in any case; `/tokenize`'s cap and pieces; `/v1/models/{id}`; a streamed
//! request refused as busy getting a real 429; the server's flags judged up front.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::smollm2;
use crate::serve::{Server, client, get, metric, post_raw, runtime};

/// The server's address.
fn addr(s: &Server) -> SocketAddr {
    s.url.trim_start_matches("http://").parse().expect("addr")
}

/// A connection to `to` from the loopback address `from` (127.0.0.x: one peer each).
fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let stream = runtime().block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(format!("{from}:0").parse().expect("from")).expect("bind");
        let s = socket.connect(to).await.expect("connect");
        s.into_std().expect("std")
    });
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    stream
}

/// Everything `stream` sends until it closes (a read that times out fails the test: the
/// server left the connection hanging).
fn read_to_close(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the server left the connection open: {e}; got {got:?}"),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// One response's head and body off a kept-alive connection (`content-length` framed).
fn read_response(stream: &mut TcpStream) -> (u16, String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= len {
                let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                return (status, head.to_ascii_lowercase(), body.to_string());
            }
        }
        let n = stream.read(&mut buf).expect("a response");
        assert!(n > 0, "closed before a whole response: {text:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// The status of a raw HTTP response.
fn status_of(response: &str) -> u16 {
    response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The JSON body of a raw HTTP response.
fn body_of(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(Value::Null)
}

/// A small synthesized model served by one stage: the listener's tests need no real text.
fn synth_server(extra: &[&str]) -> Server {
    let model = crate::support::synth_model(2);
    let mut args = vec!["--stages", "1"];
    args.extend_from_slice(extra);
    Server::local(&model, &args)
}

#[test]
fn a_stalled_body_is_answered_408_and_drip_fed_headers_are_cut_off_after_their_timeouts() {
    let s = synth_server(&[
        "--body-timeout-s",
        "1",
        "--header-timeout-s",
        "2",
        "--max-connections",
        "2",
        "--max-connections-per-peer",
        "2",
    ]);
    let to = addr(&s);
    wait_for_no_other_connections(to);
    // Two connections, every place the server has, each stalled mid-body.
    let mut stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = connect_from("127.0.0.1", to);
            c.write_all(
                b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                  Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
            )
            .expect("write");
            c
        })
        .collect();
    for c in &mut stalled {
        let r = read_to_close(c);
        assert_eq!(status_of(&r), 408, "{r}");
        let e = body_of(&r);
        assert_eq!(
            (e["error"]["type"].as_str(), e["error"]["reason"].as_str()),
            (Some("request_timeout"), Some("body_timeout")),
            "{r}"
        );
    }
    // Headers that never end: the connection is closed, and its place comes back.
    let mut drip = connect_from("127.0.0.1", to);
    drip.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n").expect("write");
    let start = Instant::now();
    let writer = {
        let mut w = drip.try_clone().expect("clone");
        std::thread::spawn(move || {
            for _ in 0..200 {
                if w.write_all(b"X-Drip: 1\r\n").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let r = read_to_close(&mut drip);
    assert!(r.is_empty(), "closed without an answer: {r}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "drip-fed headers held {:?}",
        start.elapsed()
    );
    writer.join().expect("writer");
    s.wait_healthy(Duration::from_secs(10));
}

#[test]
fn clients_over_the_connection_caps_are_answered_at_once_429_per_address_and_503_in_all() {
    let s = synth_server(&[
        "--max-connections",
        "3",
        "--max-connections-per-peer",
        "2",
        "--header-timeout-s",
        "120",
    ]);
    let to = addr(&s);
    wait_for_no_other_connections(to);
    // Two idle connections from one address hold its share.
    let mut idle = vec![connect_from("127.0.0.1", to), connect_from("127.0.0.1", to)];
    let mut third = connect_from("127.0.0.1", to);
    let r = read_to_close(&mut third);
    assert_eq!(status_of(&r), 429, "{r}");
    assert!(r.to_ascii_lowercase().contains("retry-after: 1"), "{r}");
    assert_eq!(body_of(&r)["error"]["reason"], "too_many_connections_from_peer", "{r}");
    // Another address is served, on the last place there is.
    let mut other = connect_from("127.0.0.2", to);
    other.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("write");
    assert_eq!(read_response(&mut other).0, 200);
    // Every place is taken: a new client is answered 503 at once, not parked.
    let mut late = connect_from("127.0.0.3", to);
    late.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").expect("write");
    let r = read_to_close(&mut late);
    assert_eq!(status_of(&r), 503, "{r}");
    assert!(r.to_ascii_lowercase().contains("retry-after: 1"), "{r}");
    assert_eq!(body_of(&r)["error"]["reason"], "too_many_connections", "{r}");
    // A closed connection gives its place back.
    drop(idle.pop());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = connect_from("127.0.0.3", to);
        c.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .expect("write");
        let r = read_to_close(&mut c);
        if status_of(&r) == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the place never came back: {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = raw(to, "GET", "/metrics", "127.0.0.1", &[], "");
    for (reason, n) in [("too_many_connections_from_peer", 1.0), ("too_many_connections", 1.0)] {
        let name = format!("swactor_http_connections_refused_total{{reason=\"{reason}\"}}");
        assert!(metric(&r, &name) >= n, "{name}: {r}");
    }
}

/// Waits until the server holds no connection but the probe asking it (the health
/// checks' are gone); the probe's is one the server closes itself, gone once answered.
fn wait_for_no_other_connections(to: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = raw(to, "GET", "/metrics", "127.0.0.1", &[], "");
        if metric(&r, "swactor_http_connections_open") == 1.0 {
            return;
        }
        assert!(Instant::now() < deadline, "connections stayed open: {r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A raw request to `to` with `host` and `headers`; the whole response.
fn raw(
    to: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[&str],
    body: &str,
) -> String {
    let mut c = connect_from("127.0.0.1", to);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    c.write_all(req.as_bytes()).expect("write");
    read_to_close(&mut c)
}

#[test]
fn only_allowed_origins_and_hosts_json_bodies_and_a_bearer_of_any_case_reach_the_api() {
    let dir = crate::support::scratch().join("serve-browser");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let key_file = dir.join("key");
    std::fs::write(&key_file, "k3y\n").expect("key");
    let s = synth_server(&[
        "--api-key-file",
        key_file.to_str().expect("path"),
        "--cors-origin",
        "https://app.example",
        "--allowed-host",
        "box.lan",
    ]);
    let to = addr(&s);
    let own = s.url.clone();
    let host = own.trim_start_matches("http://").to_string();
    let body = r#"{"prompt":"hi","max_tokens":2}"#;
    let json = "Content-Type: application/json";
    let key = "Authorization: Bearer k3y";
    // Preflights: localhost pages, the listed origin and the server's own page are allowed.
    for origin in ["http://localhost:3000", "https://app.example", own.as_str()] {
        let r = raw(
            to,
            "OPTIONS",
            "/v1/completions",
            &host,
            &[
                &format!("Origin: {origin}"),
                "Access-Control-Request-Method: POST",
                "Access-Control-Request-Headers: authorization, content-type",
            ],
            "",
        );
        let lower = r.to_ascii_lowercase();
        assert_eq!(status_of(&r), 204, "{origin}: {r}");
        assert!(
            lower
                .contains(&format!("access-control-allow-origin: {}", origin.to_ascii_lowercase())),
            "{r}"
        );
        assert!(lower.contains("access-control-allow-headers: authorization, content-type"), "{r}");
        assert!(lower.contains("access-control-allow-methods: get, post"), "{r}");
    }
    // Another site's page: neither its preflight nor its request passes.
    let evil = "Origin: https://evil.example";
    let r = raw(
        to,
        "OPTIONS",
        "/v1/completions",
        &host,
        &[evil, "Access-Control-Request-Method: POST"],
        "",
    );
    assert_eq!(
        (status_of(&r), body_of(&r)["error"]["reason"].as_str()),
        (403, Some("origin_not_allowed")),
        "{r}"
    );
    let r = raw(to, "POST", "/v1/completions", &host, &[evil, json, key], body);
    assert_eq!(status_of(&r), 403, "{r}");
    // The server's own page is answered, with its origin allowed.
    let r =
        raw(to, "POST", "/v1/completions", &host, &[&format!("Origin: {own}"), json, key], body);
    assert_eq!(status_of(&r), 200, "{r}");
    assert!(r.to_ascii_lowercase().contains(&format!("access-control-allow-origin: {own}")), "{r}");
    // Hosts: IP addresses, localhost and --allowed-host names; another name is rebinding.
    for ok in [host.clone(), format!("localhost:{}", to.port()), format!("box.lan:{}", to.port())] {
        let r = raw(to, "GET", "/v1/models", &ok, &[key], "");
        assert_eq!(status_of(&r), 200, "{ok}: {r}");
    }
    let r = raw(to, "GET", "/health", &format!("evil.example:{}", to.port()), &[], "");
    assert_eq!(
        (status_of(&r), body_of(&r)["error"]["reason"].as_str()),
        (403, Some("host_not_allowed")),
        "{r}"
    );
    // Bodies must say they are JSON.
    for ct in
        ["Content-Type: text/plain", "Content-Type: application/x-www-form-urlencoded", "X-None: 1"]
    {
        let r = raw(to, "POST", "/v1/completions", &host, &[ct, key], body);
        assert_eq!(status_of(&r), 415, "{ct}: {r}");
        assert_eq!(body_of(&r)["error"]["type"], "unsupported_media_type", "{r}");
    }
    let r = raw(
        to,
        "POST",
        "/tokenize",
        &host,
        &["Content-Type: text/plain", key],
        r#"{"content":"a"}"#,
    );
    assert_eq!(status_of(&r), 415, "{r}");
    // The bearer scheme in any case; a wrong key still 401.
    for auth in ["Authorization: bearer k3y", "Authorization: BEARER k3y"] {
        let r = raw(to, "POST", "/v1/completions", &host, &[json, auth], body);
        assert_eq!(status_of(&r), 200, "{auth}: {r}");
    }
    let r = raw(to, "POST", "/v1/completions", &host, &[json, "Authorization: bearer k3z"], body);
    assert_eq!(status_of(&r), 401, "{r}");
}

#[test]
fn tokenize_refuses_content_past_the_prompt_cap_and_its_pieces_are_the_tokens_texts() {
    let Some(model) = smollm2() else { return };
    let s = Server::local(&model, &["--stages", "1"]);
    let u = &s.url;
    runtime().block_on(async {
        // --max-seq-len 512: at most 64 bytes per position.
        let long = json!({"content": "a".repeat(64 * 512 + 1), "with_pieces": true});
        let a = post_raw(&format!("{u}/tokenize"), long.to_string().into_bytes(), None).await;
        assert_eq!(a.status, 413, "{}", &a.body[..a.body.len().min(300)]);
        let e: Value = serde_json::from_str(&a.body).expect("json");
        assert_eq!(
            (e["error"]["type"].as_str(), e["error"]["reason"].as_str()),
            (Some("request_too_large"), Some("content_too_long"))
        );
        let text = "Once upon a time, a café served crème brûlée. 東京 🙂";
        let plain = json!({"content": text});
        let a = post_raw(&format!("{u}/tokenize"), plain.to_string().into_bytes(), None).await;
        let ids: Value = serde_json::from_str(&a.body).expect("json");
        let with = json!({"content": text, "with_pieces": true});
        let a = post_raw(&format!("{u}/tokenize"), with.to_string().into_bytes(), None).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let pieces: Value = serde_json::from_str(&a.body).expect("json");
        let pieces = pieces["tokens"].as_array().expect("pieces").clone();
        let piece_ids: Vec<Value> = pieces.iter().map(|p| p["id"].clone()).collect();
        assert_eq!(Value::Array(piece_ids), ids["tokens"], "the same tokens");
        let ascii: String =
            pieces[..4].iter().map(|p| p["piece"].as_str().expect("piece")).collect();
        assert!(text.starts_with(&ascii) && !ascii.is_empty(), "{ascii:?}");
        for p in &pieces {
            let id = json!({"tokens": [p["id"]]});
            let d = post_raw(&format!("{u}/detokenize"), id.to_string().into_bytes(), None).await;
            let d: Value = serde_json::from_str(&d.body).expect("json");
            assert_eq!(d["content"], p["piece"], "each piece is its token's text");
        }
    });
}

#[test]
fn a_model_is_answered_by_its_id_and_an_unknown_id_is_404_model_not_found() {
    let s = synth_server(&["--model-name", "org/tiny-model"]);
    let (status, m) = get(&format!("{}/v1/models/org/tiny-model", s.url)).expect("model");
    assert_eq!(status, 200, "{m}");
    assert_eq!((m["id"].as_str(), m["object"].as_str()), (Some("org/tiny-model"), Some("model")));
    assert!(m["created"].is_u64() && m["owned_by"].is_string(), "{m}");
    let (_, list) = get(&format!("{}/v1/models", s.url)).expect("models");
    assert_eq!(list["data"][0], m, "the same object as the list's");
    let (status, e) = get(&format!("{}/v1/models/gpt-4o", s.url)).expect("unknown");
    assert_eq!(status, 404, "{e}");
    assert_eq!(
        (e["error"]["type"].as_str(), e["error"]["reason"].as_str()),
        (Some("not_found_error"), Some("model_not_found"))
    );
    assert_eq!(e["error"]["code"], 404);
}

#[test]
fn a_streamed_request_refused_as_busy_is_a_429_with_retry_after_not_an_error_event() {
    let s = synth_server(&["--max-sequences", "1", "--queue", "1"]);
    let u = s.url.clone();
    runtime().block_on(async {
        let url = format!("{u}/v1/completions");
        let long = json!({"prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": true,
                          "stream": true});
        // One request holds the slot (its first chunk arrived), one waits in the queue.
        let mut first = client()
            .post(&url)
            .header("content-type", "application/json")
            .body(long.to_string())
            .send()
            .await
            .expect("send");
        assert_eq!(first.status(), 200);
        first.chunk().await.expect("chunk").expect("a chunk");
        let (queued_url, queued_body) = (url.clone(), long.to_string().into_bytes());
        let queued = tokio::spawn(async move { post_raw(&queued_url, queued_body, None).await });
        let deadline = Instant::now() + Duration::from_secs(30);
        while metric(&metrics_of_async(&u).await, "swactor_requests_waiting") < 1.0 {
            assert!(Instant::now() < deadline, "the second request never queued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let a = post_raw(&url, long.to_string().into_bytes(), None).await;
        assert_eq!(a.status, 429, "{}", a.body);
        assert_eq!(a.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
        let e: Value = serde_json::from_str(&a.body).expect("an error body");
        assert_eq!(
            (e["error"]["type"].as_str(), e["error"]["reason"].as_str()),
            (Some("rate_limit_error"), Some("busy"))
        );
        drop(first);
        queued.abort();
    });
}

async fn metrics_of_async(u: &str) -> String {
    client().get(format!("{u}/metrics")).send().await.expect("m").text().await.expect("t")
}

#[test]
fn a_body_limit_of_zero_is_a_usage_error_and_each_servers_help_tells_its_own_defaults() {
    let exe = assert_cmd::cargo::cargo_bin("swactor");
    let mut child = Command::new(&exe)
        .args(["run", "local", "--serve", "--http", "127.0.0.1:0", "--max-body-bytes", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    // A usage error exits at once; a server that started instead is stopped and fails.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("--max-body-bytes 0 was taken: the server started");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut err).expect("stderr");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--max-body-bytes"), "{err}");
    let help = |args: &[&str]| {
        let out = Command::new(&exe).args(args).arg("--help").output().expect("help");
        let text = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let at = text.find("--max-sequences <N>").expect("--max-sequences");
        text[at..].split(" --").next().unwrap_or("").to_string()
    };
    let serve = help(&["orchestrate", "serve"]);
    assert!(serve.contains("[default: 8]") && !serve.contains("--requests"), "{serve}");
    let local = help(&["run", "local"]);
    assert!(local.contains("8 with `--requests` or `--serve`"), "{local}");
    let pool = help(&["orchestrate", "pool"]);
    assert!(pool.contains("8 with `--requests`") && !pool.contains("--serve"), "{pool}");
    let plan = help(&["run", "plan"]);
    assert!(plan.contains("[default: 1]") && !plan.contains("--requests"), "{plan}");
}
