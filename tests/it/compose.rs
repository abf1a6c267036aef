//! README's cluster from one file: the image built from this binary (`deploy/cluster
//! image`), keys and pool file (`deploy/cluster init`), three nodes and a server from
//! `deploy/compose.yaml` under docker-compose. A chat streams; a node container is killed
//! once a long stream has streamed eight events of its own, and that stream resumes on the
//! nodes left to exactly its undisturbed text (`failovers_total{outcome="resumed"}` counts
//! it); the node starts again with its key, the session grows back onto it (the page's view
//! shows it serving) and a later request succeeds;
//! `down -v` leaves no container, network or volume behind. Needs Docker and
//! docker-compose (Debian's packages); without them the test says so and returns, except
//! under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli::smollm2;
use crate::serve::{get, metric, metrics_of, post_raw};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn available() -> bool {
    let ok = |c: &str, a: &str| Command::new(c).arg(a).output().is_ok_and(|o| o.status.success());
    let found = ok("docker", "info") && ok("docker-compose", "version");
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI must have docker and docker-compose");
        eprintln!("note: docker or docker-compose is missing; the compose test is skipped");
    }
    found
}

/// One compose project, brought down (with its volumes and image) when dropped.
struct Cluster {
    project: String,
    env: PathBuf,
    image: String,
}

impl Cluster {
    fn compose(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker-compose")
            .args(["-p", &self.project, "--env-file"])
            .arg(&self.env)
            .arg("-f")
            .arg(root().join("deploy/compose.yaml"))
            .args(args)
            .env("SWACTOR_IMAGE", &self.image)
            .output()
            .expect("docker-compose")
    }

    fn up(&self) {
        let out = self.compose(&["up", "-d"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    fn logs(&self) -> String {
        String::from_utf8_lossy(&self.compose(&["logs", "--tail", "40"]).stdout).into_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v", "--remove-orphans", "-t", "5"]);
        let _ = Command::new("docker").args(["rmi", "-f", &self.image]).output();
    }
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

fn wait_health(url: &str, status: u16, timeout: Duration, cluster: &Cluster) {
    let deadline = Instant::now() + timeout;
    loop {
        if get(&format!("{url}/health")).is_ok_and(|(s, _)| s == status) {
            return;
        }
        assert!(Instant::now() < deadline, "health never {status}; logs:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// A streamed completion's text, from its SSE events' data.
fn completion_text(events: &[String]) -> String {
    events
        .iter()
        .filter_map(|e| serde_json::from_str::<serde_json::Value>(e).ok())
        .filter_map(|v| v["choices"][0]["text"].as_str().map(str::to_string))
        .collect()
}

/// POSTs `body` to `url` and reads the SSE answer as it comes, sending a unit down
/// `chunks` for each event of this stream; the whole body once it ends.
async fn stream_counting(
    url: &str,
    body: &serde_json::Value,
    chunks: std::sync::mpsc::Sender<()>,
) -> String {
    use futures_util::StreamExt;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    let r = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 200);
    let mut all = String::new();
    let mut bytes = r.bytes_stream();
    while let Some(part) = bytes.next().await {
        let part = String::from_utf8_lossy(&part.expect("chunk")).into_owned();
        for _ in 0..part.matches("\n\n").count() {
            let _ = chunks.send(());
        }
        all.push_str(&part);
    }
    all
}

fn run(script: &Path, args: &[&std::ffi::OsStr], image: &str) -> String {
    let out =
        Command::new(script).args(args).env("SWACTOR_IMAGE", image).output().expect("cluster");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_compose_cluster_serves_re_forms_after_a_killed_node_and_leaves_nothing_behind() {
    let Some(model) = smollm2() else { return };
    if !available() {
        return;
    }
    let pid = std::process::id();
    let image = format!("swactor:it-{pid}");
    let script = root().join("deploy/cluster");
    let bin = assert_cmd::cargo::cargo_bin("swactor");
    run(&script, &["image".as_ref(), bin.as_os_str()], &image);
    let state = crate::support::scratch().join("compose-state");
    let _ = std::fs::remove_dir_all(&state);
    let port = free_port();
    let subnet = format!("10.213.{}", 100 + pid % 100);
    let env = run(
        &script,
        &[
            "init".as_ref(),
            model.as_os_str(),
            state.as_os_str(),
            port.to_string().as_ref(),
            subnet.as_ref(),
        ],
        &image,
    );
    let project = format!("swactor-it-{pid}");
    let cluster = Cluster { project: project.clone(), env: PathBuf::from(env), image };
    cluster.up();
    let url = format!("http://127.0.0.1:{port}");
    wait_health(&url, 200, Duration::from_secs(180), &cluster);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let chat = json!({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                      "stream": true, "max_tokens": 16, "temperature": 0});
    let a = rt.block_on(post_raw(
        &format!("{url}/v1/chat/completions"),
        chat.to_string().into_bytes(),
        None,
    ));
    assert_eq!(a.status, 200, "{}", a.body);
    let events = a.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{}", a.body);
    assert!(events.len() > 3, "{}", a.body);

    // The undisturbed text of the long stream, then the same stream with a node container
    // killed once it has streamed 8 chunks of its own: the session re-forms over the two
    // nodes left and the stream goes on to the same text without an error.
    let stream_url = format!("{url}/v1/completions");
    let body = json!({"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0,
                      "stream": true});
    let undisturbed = rt.block_on(post_raw(&stream_url, body.to_string().into_bytes(), None));
    let want = completion_text(&undisturbed.events());
    let (chunks_tx, chunks_rx) = std::sync::mpsc::channel();
    let stream = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(stream_counting(&stream_url, &body, chunks_tx))
    });
    for _ in 0..8 {
        chunks_rx.recv_timeout(Duration::from_secs(60)).expect("the long stream's chunks");
    }
    let node3 = format!("{project}_node3_1");
    let out = Command::new("docker").args(["kill", &node3]).output().expect("kill");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let body = stream.join().expect("stream");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert!(!body.contains("\"error\""), "the stream resumed: {body}");
    let events: Vec<String> =
        body.split("\n\n").filter_map(|e| e.strip_prefix("data: ").map(str::to_string)).collect();
    assert_eq!(completion_text(&events), want, "the resumed stream lost or repeated nothing");
    wait_health(&url, 200, Duration::from_secs(60), &cluster);
    let metrics = metrics_of(&url);
    assert_eq!(metric(&metrics, "swactor_failovers_total{outcome=\"resumed\"}"), 1.0, "{metrics}");

    // The node starts again with its key: the session grows back onto all three nodes,
    // and the page's view shows it serving.
    let out = cluster.compose(&["start", "node3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pool = get(&format!("{url}/pool")).map(|(_, v)| v).unwrap_or_default();
        let serving = pool["nodes"]["3"]["state"] == "serving";
        if serving && pool["phase"]["state"] == "serving" {
            break;
        }
        assert!(Instant::now() < deadline, "node 3 never served again: {pool}\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(250));
    }
    let body = json!({"prompt": "Once upon a time", "max_tokens": 8}).to_string().into_bytes();
    let later = rt.block_on(post_raw(&format!("{url}/v1/completions"), body, None));
    assert_eq!(later.status, 200, "{}", later.body);

    drop(cluster);
    let label = format!("label=com.docker.compose.project={project}");
    assert!(docker_lines(&["ps", "-aq", "--filter", &label]).is_empty(), "containers left");
    assert!(docker_lines(&["network", "ls", "-q", "--filter", &label]).is_empty(), "networks left");
    assert!(docker_lines(&["volume", "ls", "-q", "--filter", &label]).is_empty(), "volumes left");
}
