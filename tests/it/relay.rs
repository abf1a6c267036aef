//! Relays: a real iroh relay server (`swactor relay serve`'s, in process or as a child)
//! carrying real endpoints that have no direct path, and a whole pipeline whose nodes open
//! no QUIC port at all (`--relay-only`), with exactly the tokens of the one-process run.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use iroh::{Endpoint, EndpointAddr};
use serde_json::Value;
use swactor::net::endpoint::{EDGE_ALPN, bind, wait_for_relay};
use swactor::net::identity::NodeKey;
use swactor::net::paths::{PathKind, selected};
use swactor::net::relay::{RelayFault, RelayServer, Relays, parse_url};

use crate::support::{scratch, synth_model};

fn exe() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

async fn relay_only(seed: u8, url: &str) -> Endpoint {
    let relays = Relays::parse(&[url.to_string()], true).expect("relays");
    let any = "127.0.0.1:0".parse().expect("addr");
    let e = bind(&NodeKey::from_bytes(&[seed; 32]), any, &relays).await.expect("bind");
    wait_for_relay(&e, &relays, Duration::from_secs(20)).await.expect("the relay answers");
    e
}

/// `a` dials `b` knowing only its id and relay, sends `bytes` on a uni-stream, and `b`
/// reads them back: what arrived.
async fn exchange(a: &Endpoint, b: &Endpoint, url: &str, bytes: &[u8]) -> (Vec<u8>, PathKind) {
    let addr = EndpointAddr::new(b.id()).with_relay_url(parse_url(url).expect("url"));
    let b2 = b.clone();
    let reader = tokio::spawn(async move {
        let conn = b2.accept().await.expect("incoming").await.expect("accepted");
        let mut s = conn.accept_uni().await.expect("stream");
        let got = s.read_to_end(1 << 20).await.expect("read");
        (got, conn)
    });
    let conn = a.connect(addr, EDGE_ALPN).await.expect("connect through the relay");
    let mut s = conn.open_uni().await.expect("open");
    s.write_all(bytes).await.expect("write");
    s.finish().expect("finish");
    let (got, _held) = tokio::time::timeout(Duration::from_secs(20), reader)
        .await
        .expect("in time")
        .expect("reader");
    let path = selected(&conn).expect("a selected path").path;
    conn.close(0u32.into(), b"done");
    (got, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relay_only_endpoints_reach_each_other_through_the_relay_and_again_after_it_restarts() {
    let relay =
        RelayServer::start("127.0.0.1:0".parse().expect("addr"), None, None).await.expect("relay");
    let (url, port) = (relay.url().to_string(), relay.addr().port());
    assert_eq!(url, format!("http://127.0.0.1:{port}/"));
    let (a, b) = (relay_only(31, &url).await, relay_only(32, &url).await);
    assert!(a.bound_sockets().is_empty(), "a relay-only endpoint opens no UDP socket");
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let (got, path) = exchange(&a, &b, &url, &payload).await;
    assert_eq!(got, payload, "every byte arrives, in order");
    assert_eq!(path, PathKind::Relayed, "no direct path exists between them");

    // The relay goes away and comes back on the same address: both ends reconnect.
    relay.shutdown().await;
    let relay = RelayServer::start(format!("127.0.0.1:{port}").parse().expect("addr"), None, None)
        .await
        .expect("the relay restarts on its port");
    let (got, path) = exchange(&b, &a, &url, b"after the restart").await;
    assert_eq!(got, b"after the restart");
    assert_eq!(path, PathKind::Relayed);
    a.close().await;
    b.close().await;
    relay.shutdown().await;
}

#[test]
fn relay_options_refuse_what_names_no_relay_with_typed_reasons() {
    for bad in ["ftp://relay:1", "relay.example:3340", "http://", "https://:443", "not a url"] {
        let e = Relays::parse(&[bad.to_string()], false).expect_err(bad);
        assert_eq!(e.reason, RelayFault::BadUrl, "{bad}: {e}");
    }
    let e = Relays::parse(&[], true).expect_err("relay-only needs a relay");
    assert_eq!(e.reason, RelayFault::OnlyWithoutRelay);
    let ok = Relays::parse(&["https://relay.example.net".into()], false).expect("https");
    assert!(ok.any() && !ok.only());
    assert!(!Relays::none().any(), "no relay unless named");
}

#[test]
fn relay_serve_prints_its_url_serves_and_stops_cleanly_on_sigterm() {
    let mut child = Command::new(exe())
        .args(["relay", "serve", "--json", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("relay serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready: Value =
        serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
    assert_eq!(ready["type"], "relay_ready", "{ready}");
    let url = ready["url"].as_str().expect("url").to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert_eq!(ready["tls"], false);
    // It answers as a relay: an endpoint homes on it.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let e = relay_only(33, &url).await;
        e.close().await;
    });
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    let stopped: Value =
        serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
    assert_eq!(stopped["type"], "relay_stopped");
    assert_eq!(child.wait().expect("wait").code(), Some(0));
}

#[test]
fn relay_serve_refuses_a_missing_certificate_or_a_bad_host_and_node_boot_a_bad_relay_url() {
    let dir = scratch().join("relay-bad-cert");
    std::fs::create_dir_all(&dir).expect("dir");
    let out = Command::new(exe())
        .args(["relay", "serve", "--json", "--listen", "127.0.0.1:0", "--cert"])
        .arg(dir.join("missing.pem"))
        .arg("--key")
        .arg(dir.join("missing.key"))
        .output()
        .expect("relay serve");
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stdout).expect("the error line");
    assert_eq!(err["reason"], "relay.tls", "{err}");

    let out = Command::new(exe())
        .args(["relay", "serve", "--json", "--listen", "127.0.0.1:0", "--host", "not a host"])
        .output()
        .expect("relay serve");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stdout).expect("the error line");
    assert_eq!(err["reason"], "relay.bad_url", "{err}");

    let out = Command::new(exe())
        .args(["node", "boot", "--json", "--node-id", "1", "--listen", "127.0.0.1:0"])
        .args(["--swim", "127.0.0.1:0", "--orchestrator", &"ab".repeat(32), "--key"])
        .arg(dir.join("n.key"))
        .args(["--relay", "gopher://relay:70"])
        .output()
        .expect("node boot");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let err: Value = serde_json::from_slice(&out.stdout).expect("the error line");
    assert_eq!(err["reason"], "relay.bad_url", "{err}");
    assert!(!dir.join("n.key").exists(), "a refused boot creates no key");
}

/// Nodes booted on loopback for a test pool, each with one compute thread, and what each
/// printed when it became available.
pub(crate) struct Booted {
    pub(crate) children: Vec<std::process::Child>,
    pub(crate) available: Vec<Value>,
}

/// Boots `n` nodes (ids 1..=n) in `dir` that accept the orchestrator of `key` (created),
/// each with `extra` arguments, the first one the others' SWIM seed.
pub(crate) fn boot_nodes(
    dir: &std::path::Path,
    key: &std::path::Path,
    n: u32,
    extra: &[&str],
) -> Booted {
    let out = Command::new(exe()).args(["node", "id", "--key"]).arg(key).output().expect("id");
    let orch = String::from_utf8(out.stdout).expect("utf8").trim().to_string();
    let mut booted = Booted { children: Vec::new(), available: Vec::new() };
    let mut seed: Option<String> = None;
    for i in 1..=n {
        let mut cmd = Command::new(exe());
        cmd.args(["node", "boot", "--json", "--node-id", &i.to_string(), "--threads", "1"])
            .args(["--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
            .args(extra)
            .args(["--orchestrator", &orch, "--key"])
            .arg(dir.join(format!("n{i}.key")))
            .arg("--admin")
            .arg(dir.join(format!("n{i}.sock")))
            .arg("--cache")
            .arg(dir.join(format!("cache{i}")))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(s) = &seed {
            cmd.args(["--join", s]);
        }
        let mut child = cmd.spawn().expect("node");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        booted.children.push(child);
        let v: Value = lines
            .by_ref()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .find(|v| v["type"] == "node_available")
            .expect("node_available");
        std::thread::spawn(move || for _ in lines {});
        seed.get_or_insert_with(|| v["swim_addr"].as_str().expect("swim").to_string());
        booted.available.push(v);
    }
    booted
}

/// A `swactor relay serve` child on a free loopback port, and its URL.
pub(crate) fn serve_relay() -> (std::process::Child, String) {
    let mut relay = Command::new(exe())
        .args(["relay", "serve", "--json", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("relay");
    let mut lines = BufReader::new(relay.stdout.take().expect("stdout")).lines();
    let ready: Value =
        serde_json::from_str(&lines.next().expect("line").expect("read")).expect("relay_ready");
    std::thread::spawn(move || for _ in lines {});
    (relay, ready["url"].as_str().expect("url").to_string())
}

/// The token ids of a `--json` run's output.
pub(crate) fn token_ids(stdout: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "token")
        .filter_map(|v| v["id"].as_u64())
        .collect()
}

#[test]
fn a_pipeline_of_relay_only_nodes_gives_exactly_the_tokens_of_the_one_process_run() {
    let dir = scratch().join("relay-pipeline");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let model = synth_model(4);
    let args = ["--json", "--prompt", "The river", "--max-tokens", "8", "--model"];
    let reference = Command::new(exe()).arg("generate").args(args).arg(&model).output();
    let reference = token_ids(&reference.expect("generate").stdout);
    assert_eq!(reference.len(), 8);

    let (relay, url) = serve_relay();
    let mut children = crate::multihost::Reap(vec![relay]);

    let key = dir.join("orch.key");
    let relay_args = ["--relay", url.as_str(), "--relay-only"];
    let booted = boot_nodes(&dir, &key, 2, &relay_args);
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    for (i, v) in booted.available.iter().enumerate() {
        assert_eq!(v["addrs"], serde_json::json!([]), "a relay-only node has no address: {v}");
        assert_eq!(v["relay"], url.as_str(), "{v}");
        pool.push_str(&format!(
            "[[nodes]]\nnode_id = {}\nendpoint_id = \"{}\"\nrelay = \"{url}\"\nmemory_bytes = 8589934592\n\n",
            i + 1,
            v["endpoint_id"].as_str().expect("id"),
        ));
    }
    children.0.extend(booted.children);
    let pool_file = dir.join("pool.toml");
    std::fs::write(&pool_file, pool).expect("pool file");
    let out = Command::new(exe())
        .args(["orchestrate", "pool", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(["--relay", &url, "--window-ms", "300", "--pool-timeout", "30", "--pool"])
        .arg(&pool_file)
        .arg("--key")
        .arg(&key)
        .args(args)
        .arg(&model)
        .output()
        .expect("orchestrate");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(token_ids(&out.stdout), reference, "the relayed pipeline's tokens");
    for c in children.0.iter().skip(1) {
        Command::new("kill").args(["-TERM", &c.id().to_string()]).status().expect("kill");
    }
    for c in children.0.iter_mut().skip(1) {
        assert_eq!(c.wait().expect("wait").code(), Some(0), "a node stops cleanly");
    }
}

#[test]
fn relay_serve_with_a_certificate_serves_https_and_endpoints_trusting_it_meet_through_it() {
    let dir = scratch().join("relay-tls");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "1", "-subj", "/CN=swactor-test-relay"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        // A server certificate, not a CA one (which a verifier refuses as a server's).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (Debian's openssl package) makes the test certificate");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let mut child = Command::new(exe())
        .args(["relay", "serve", "--json", "--listen", "127.0.0.1:0", "--cert"])
        .arg(&cert)
        .arg("--key")
        .arg(&key)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("relay serve");
    let mut reap = crate::multihost::Reap(Vec::new());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    reap.0.push(child);
    let ready: Value =
        serde_json::from_str(&lines.next().expect("a line").expect("read")).expect("json");
    assert_eq!(ready["type"], "relay_ready", "{ready}");
    assert_eq!(ready["tls"], true);
    let addr = ready["addr"].as_str().expect("addr").to_string();
    assert_eq!(ready["url"], format!("https://127.0.0.1:{}/", addr.rsplit(':').next().unwrap()));
    // A TLS client sees the given certificate.
    let shown = Command::new("openssl")
        .args(["s_client", "-connect", &addr])
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("CN = swactor-test-relay"), "{text}");

    // Endpoints that trust the certificate (`--relay-ca`) reach each other through it;
    // one that does not never homes on the relay and says so.
    let url = ready["url"].as_str().expect("url").to_string();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let any = "127.0.0.1:0".parse().expect("addr");
        let relays = Relays::parse(std::slice::from_ref(&url), true).expect("relays");
        let untrusting = bind(&NodeKey::from_bytes(&[40; 32]), any, &relays).await.expect("bind");
        let refused = wait_for_relay(&untrusting, &relays, Duration::from_secs(2)).await;
        assert_eq!(refused.expect_err("an unknown certificate").reason, RelayFault::Unreachable);
        untrusting.close().await;
        let relays = relays.trusting(&cert).expect("the certificate as a root");
        let mut ends = Vec::new();
        for seed in [41, 42] {
            let e = bind(&NodeKey::from_bytes(&[seed; 32]), any, &relays).await.expect("bind");
            wait_for_relay(&e, &relays, Duration::from_secs(20)).await.expect("homed over https");
            ends.push(e);
        }
        let (got, path) = exchange(&ends[0], &ends[1], &url, b"over https").await;
        assert_eq!((got.as_slice(), path), (&b"over https"[..], PathKind::Relayed));
        for e in ends {
            e.close().await;
        }
    });
}
